#!/bin/bash
# SPDX-License-Identifier: MIT
# The fleet's Prometheus files (docs/prometheus/) are valid and their rules do what the alerts promise:
# promtool checks the configuration and rules and runs the rules' unit tests (rtd-rules.test.yml).
set -u
DIR=$1
promtool=$(command -v promtool) || { echo "SKIP: promtool missing (Debian package prometheus)"; exit 77; }
passed=0 failed=0
check() {
        local what=$1
        shift
        if out=$("$@" 2>&1); then
                passed=$((passed + 1))
                echo "PASS $what"
        else
                failed=$((failed + 1))
                echo "FAIL $what"
                echo "$out"
        fi
}
check "check config fleet.yml" "$promtool" check config "$DIR/fleet.yml"
check "check rules rtd-rules.yml" "$promtool" check rules "$DIR/rtd-rules.yml"
check "test rules rtd-rules.test.yml" "$promtool" test rules "$DIR/rtd-rules.test.yml"
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
