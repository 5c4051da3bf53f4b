"""Package discovery only (metadata lives in pyproject.toml).

``kernels/`` is installed as ``relin.kernels``, never as a top-level ``kernels`` (that name
belongs to the Hugging Face ``kernels`` distribution, which transformers looks for).
"""
from setuptools import find_packages, setup

kernel_packages = ["relin.kernels"] + [f"relin.kernels.{p}" for p in find_packages("kernels")]
setup(packages=find_packages("src") + kernel_packages)
