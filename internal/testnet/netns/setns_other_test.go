//go:build linux && !amd64

package netns

// sysSetns is setns(2)'s number where known; 0 skips the tests that need it.
const sysSetns = 0
