"""The local target: a virtualenv on this machine, processes contained in a cgroup."""
