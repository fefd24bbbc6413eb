#!/bin/bash
# SPDX-License-Identifier: MIT
# rtctl's bash completion offers what rtctl accepts: its verbs, each verb's options, policies, states.
# Usage: completion.sh COMPLETION_FILE RTCTL
set -u
COMP_FILE=$1 RTCTL=$2
# shellcheck source=/dev/null
source "$COMP_FILE" || { echo "FAIL: cannot source $COMP_FILE"; exit 1; }
fail=0
complete_line() {       # words... ; the last word is the one being completed
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()
        _rtctl
        echo "${COMPREPLY[*]}"
}
expect() {              # description, expected word, words...
        local d=$1 want=$2; shift 2
        local got; got=$(complete_line "$@")
        if [[ " $got " == *" $want "* ]]; then echo "PASS: $d"; else echo "FAIL: $d: '$want' not in '$got'"; fail=1; fi
}
expect "verbs" submit rtctl su
expect "global options" --json rtctl --j
expect "submit --wait" --wait rtctl submit --w
expect "submit --policy values" rr rtctl submit --policy r
expect "list --state values" timed_out rtctl list --state t
expect "logs --follow" --follow rtctl logs --f
expect "verb after a global option" status rtctl --json st
# Every verb rtctl lists in --help is completed, and every completed submit option is one rtctl knows.
for v in $("$RTCTL" --help | awk '/^Verbs:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{on=0}'); do
        expect "verb $v from rtctl --help" "$v" rtctl "${v:0:2}"
done
help=$("$RTCTL" submit --help 2>&1)
for o in $(complete_line rtctl submit --); do
        case $o in --|--help|--json) continue;; esac
        grep -q -- "$o" <<<"$help" || { echo "FAIL: completion offers 'submit $o', which rtctl submit --help does not list"; fail=1; }
done
exit $fail
