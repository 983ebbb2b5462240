// Package docs holds the repository's reference documentation (the Markdown
// files beside this one) and the tests that keep it true to the code: every
// configuration key of the plugins, every API route, the deploy files, and no
// reference to documents outside the repository.
package docs
