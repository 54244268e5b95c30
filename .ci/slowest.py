#!/usr/bin/env python3
"""Pass `cargo test` output through unchanged, then print where the time went.

Reads the merged stdout/stderr of `cargo test` on stdin, echoes every line as it arrives, and
notes when each test binary starts ("Running ..." / "Doc-tests ...") and ends ("test result:").
At the end it prints the ten slowest test binaries by wall time, and the ten slowest single
tests among those that are timed one by one: the e2e and can-fail harnesses' trials, which
write target/tmp/{e2e,can_fail}-durations.tsv (libtest does not time single tests on stable
Rust). It always exits 0; .ci/run's `set -o pipefail` keeps cargo's status.
"""
import os
import re
import sys
import time

RUNNING = re.compile(r"^\s*(Running (?:unittests )?(\S+)|Doc-tests (\S+))")


def main() -> None:
    binaries = []  # (seconds, name)
    current = None
    started = time.monotonic()
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        now = time.monotonic()
        m = RUNNING.match(line)
        if m:
            current = (m.group(2) or f"doc-tests {m.group(3)}", now)
        elif line.startswith("test result:") and current:
            binaries.append((now - current[1], current[0]))
            current = None
    total = time.monotonic() - started
    print(f"\n== where the test time went ({total / 60:.1f} min for `cargo test`, build included)")
    print("slowest test binaries:")
    for secs, name in sorted(binaries, reverse=True)[:10]:
        print(f"  {secs:8.1f}s  {name}")
    trials = []
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    for harness in ("e2e", "can_fail"):
        path = os.path.join(target, "tmp", f"{harness}-durations.tsv")
        try:
            with open(path, encoding="utf-8") as f:
                for row in f:
                    secs, _, key = row.rstrip("\n").partition("\t")
                    try:
                        trials.append((float(secs), f"{harness}: {key}"))
                    except ValueError:
                        pass
        except OSError:
            pass
    if trials:
        print("slowest 10 tests (trials of the e2e and can-fail harnesses):")
        for secs, name in sorted(trials, reverse=True)[:10]:
            print(f"  {secs:8.1f}s  {name}")


if __name__ == "__main__":
    main()
