"""TensorFlow's releases as tftrain knows them, a fact every wing may read: what each release needs
(releases.py: images, Python, CUDA/cuDNN, Horovod, Keras 3 or tf-keras) and its tested package set
(curated.py + constraints/tensorflow-X.Y.txt, remade by scripts/refresh-frameworks). Data and pure
functions only: the manifest validates against them, environments build from them."""
