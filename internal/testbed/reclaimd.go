package testbed

import "fmt"

// ReclaimdAgentConfig is the config of a reclaimd agent of the bed for
// node, listening on addr and replaying the samples in the file replay
// (agent.replay, for fake GPUs), with the agents' shared secret file: the
// set-up that the demo and the integration tests share. Lines of the agent
// section (faults_file) may follow it.
func (b *Bed) ReclaimdAgentConfig(node, addr, secret, replay string) string {
	return fmt.Sprintf(`apiVersion: strata/v1
kind: ReclaimdConfig
slurm:
  url: %s
  token_file: %s
agent:
  listen: %s
  node: %s
  interval: 1s
  window: 5m
  token_file: %s
  replay: %s
`, b.URL, b.TokenFile, addr, node, secret, replay)
}

// ReclaimdControllerConfig is the config of a reclaimd controller of the
// bed, acting as its admin: its API on addr, its state in stateFile, a
// 5 s loop over the rules and tenant map files, and the agents at
// agentsURL/{node} with the shared secret file, and the bearer token of
// its read API in apiToken (api.token_file: every /v1 request carries
// the file's content). Sections (health, recovery) may follow it.
func (b *Bed) ReclaimdControllerConfig(addr, stateFile, rules, tenants, agentsURL, secret, apiToken string) string {
	return fmt.Sprintf(`apiVersion: strata/v1
kind: ReclaimdConfig
listen: %s
api:
  token_file: %s
state_file: %s
interval: 5s
rules_file: %s
tenants_file: %s
slurm:
  url: %s
  user: %s
  token_file: %s
agents:
  url_template: %s/{node}
  timeout: 2s
  token_file: %s
`, addr, apiToken, stateFile, rules, tenants, b.URL, b.AdminUser, b.TokenFile, agentsURL, secret)
}
