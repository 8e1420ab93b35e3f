"""Deploy: a registered version as a serving image, proven before it is published (`tftrain deploy`).

The rooms: stage.py (the stage itself: the version copied and verified, built, smoke-tested, pushed,
linked, rendered for Kubernetes; typed arguments, no command line), build.py (the image on the
daemon: built through runner.environments, pushed), smoke.py (the image run as a cluster runs it:
ready, the sample predicted and compared, a key enforced), release.py (the GitHub release's body
links the image by digest), kubernetes.py (the KServe InferenceService, printed and applied).
What the image holds is runner.serving.image's; the InferenceService's document runner.serving.inference_service's.
"""
