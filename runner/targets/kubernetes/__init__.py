"""The kubernetes target: Kubeflow TFJob/MPIJob resources, their API client."""
