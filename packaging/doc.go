// Package packaging holds the tests of Strata's deb and RPM packages, built
// by `make packages` from the nfpm configurations in nfpm/.
//
// The unit tests check the files the packages are made of: every example
// configuration is shipped as a config|noreplace file with its owner,
// group and mode; each preinst makes exactly the users of its sysusers.d
// file; the scriptlets never start a service; the version is one dpkg and
// rpm both order. The install tests (build tag integration) install the
// debs into a copy of the Debian test-bed root, upgrade and remove them,
// and inspect the RPMs with Debian's rpm.
package packaging
