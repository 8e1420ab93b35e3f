"""tftrain's stand-in for the Azure ML SDK (`compat: azureml`): `azureml.core.Run` routes the
run API into tftrain; other SDK classes import, and raise when used."""
