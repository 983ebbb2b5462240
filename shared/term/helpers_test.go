package term

import "github.com/paddockhq/paddock/shared/runtime/runtimetest"

// waitFor polls cond until it holds, failing the test after timeout.
var waitFor = runtimetest.WaitFor
