#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tools/tally-tests on made-up meson logs: what CI's closing line says of each kind of result."""
import json
import os
import subprocess
import sys
import tempfile

TALLY = sys.argv[1]
failures = 0


def run(results, *extra):
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "meson-logs"))
        with open(os.path.join(d, "meson-logs", "testlog.json"), "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
        p = subprocess.run([TALLY, d, *extra], capture_output=True, text=True)
        return p.stdout.strip().splitlines()[-1], p.returncode


def expect(name, results, line, rc, *extra):
    global failures
    got = run(results, *extra)
    if got != (line, rc):
        print(f"FAIL {name}: got {got}, wanted {(line, rc)}")
        failures += 1
    else:
        print(f"ok {name}")


def t(result, stdout=""):
    return {"name": "x", "result": result, "stdout": stdout, "stderr": ""}


expect("plain ok and fail", [t("OK"), t("FAIL")], "1 passed, 1 failed, 0 skipped", 1)
expect("own cases counted", [t("OK", "3 passed, 0 failed, 2 skipped\n")], "3 passed, 0 failed, 2 skipped", 0)
expect("cmocka summary counted", [t("OK", "[  PASSED  ] 4 test(s).\n")], "4 passed, 0 failed, 0 skipped", 0)
# CI's run 5 (session 6) read "1 failed" here: a whole script skipped, its cases reported as skipped.
expect("skipped script with own cases is no failure", [t("SKIP", "0 passed, 0 failed, 7 skipped\n")],
       "0 passed, 0 failed, 7 skipped", 0)
expect("skip without cases", [t("SKIP")], "0 passed, 0 failed, 1 skipped", 0)
expect("crash after passing cases still fails", [t("FAIL", "5 passed, 0 failed, 0 skipped\n")],
       "5 passed, 1 failed, 0 skipped", 1)
expect("ok test that reports a failed case fails", [t("OK", "5 passed, 1 failed, 0 skipped\n")],
       "5 passed, 1 failed, 0 skipped", 1)
expect("timeout fails", [t("TIMEOUT")], "0 passed, 1 failed, 0 skipped", 1)
expect("failed build step", [t("OK")], "1 passed, 1 failed, 0 skipped", 1, "--failed-step", "asan-build")
expect("failed test step adds no case", [t("FAIL")], "0 passed, 1 failed, 0 skipped", 1,
       "--failed-step", "tests")
print(f"{10 - failures} passed, {failures} failed, 0 skipped")
sys.exit(1 if failures else 0)
