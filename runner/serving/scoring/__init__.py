"""Azure scoring scripts (`score.py`: init() + run()) served unchanged on Azure's own inference server
(azmlinfsrv): script.py (what the version keeps and records), check.py + gate.py (the gate calls
init() and run() on the sample), server.py + guard.py (`tftrain serve`: azmlinfsrv behind the key
and the body limit), smoke.py (`tftrain deploy`'s smoke test), release.py (the script in a GitHub
release)."""
