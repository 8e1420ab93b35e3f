"""Facts every wing may import, on the ground floor (they import nothing of tftrain but errors):
the targets named once (catalog.py), this machine's CPUs and GPUs (machine.py), references to runs
and versions parsed once (refs.py), and the Kubernetes API reached one way (kube_api.py)."""
