"""The kubernetes target: Kubeflow TFJob/MPIJob resources and their job client (over runner.shared.kube_api)."""
