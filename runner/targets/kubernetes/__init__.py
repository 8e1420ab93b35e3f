"""The kubernetes target: Kubeflow TFJob/MPIJob resources and their job client (over runner.kube_api)."""
