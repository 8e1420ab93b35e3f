"""Which KServe serves which TensorFlow release, and which of the release's tested pins it keeps."""

from __future__ import annotations

from runner.frameworks.serving import framework_constraints, serving_constraints, serving_requirements


def _pins(text: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict(line.split("==") for line in lines)


def test_the_default_release_is_served_by_kserve_016_within_its_whole_set():
    assert serving_requirements(None)[0] == "kserve==0.16.0"
    assert serving_constraints("2.18") == framework_constraints("2.18")
    assert _pins(serving_constraints("2.18"))["protobuf"].startswith("5.")


def test_tensorflow_221_is_served_by_kserve_021_with_kserves_protobuf():
    assert serving_requirements("2.21.0", onnx=True)[:2] == ("kserve==0.21.0", "tensorflow-cpu==2.21.0")
    served = _pins(serving_constraints("2.21"))
    assert "protobuf" not in served  # the set's 7.x is outside KServe 0.21's <7
    assert served["tensorflow-cpu"] == "2.21.0"
    assert "protobuf" in _pins(framework_constraints("2.21"))  # the gate's and export's environments keep it
