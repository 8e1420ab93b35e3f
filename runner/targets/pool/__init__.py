"""The pool target: your own hosts over ssh, leased per run (preflight, schedule, leases, dispatch, run_on_hosts)."""
