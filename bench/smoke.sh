#!/usr/bin/env bash
# Entry point used by scripts/test --tier bench: the smoke test lives in tests/bench.
exec "$(dirname "$0")/../tests/bench/smoke.sh" "$@"
