package deploy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// A kind the apiserver's discovery lacks is "not served"; an apiserver
// that does not answer is said to be unreachable, not to lack the kind.
// The apiserver here answers discovery only (core v1 with ConfigMaps, no
// Services), as a real one without some API would.
func TestMappingErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`))
		case "/apis":
			_, _ = w.Write([]byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`))
		case "/api/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get","list"]}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	service := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	for name, tc := range map[string]struct {
		url     string
		gvk     schema.GroupVersionKind
		want    string
		notWant string
	}{
		"served":      {url: srv.URL, gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}},
		"not served":  {url: srv.URL, gvk: service, want: "/v1, Kind=Service: the cluster does not serve this kind"},
		"unreachable": {url: downURL, gvk: service, want: "the Kubernetes apiserver did not answer discovery", notWant: "does not serve"},
	} {
		t.Run(name, func(t *testing.T) {
			k, err := NewKube(&rest.Config{Host: tc.url}, "strata-bridge")
			if err != nil {
				t.Fatal(err)
			}
			_, err = k.mapping(tc.gvk)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("mapping: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("mapping: %v; want %q", err, tc.want)
			case tc.notWant != "" && err != nil && strings.Contains(err.Error(), tc.notWant):
				t.Errorf("mapping: %v; must not say %q", err, tc.notWant)
			}
		})
	}
}
