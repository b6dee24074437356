"""Package layout: the repository keeps runtime/, actors/ and scenarios/ at the top level; they install as
subpackages of the one import package `barriersim`, with the scenario files (scenarios/*.toml, and the large runs in
scenarios/large/, a data package of its own) as package data."""

from setuptools import find_packages, setup

TOP_LEVEL = ("runtime", "actors", "scenarios")

packages = ["barriersim"] + [f"barriersim.{p}" for p in find_packages("barriersim")]
package_dir = {"barriersim": "barriersim"}
for top in TOP_LEVEL:
    package_dir[f"barriersim.{top}"] = top
    packages.append(f"barriersim.{top}")
    packages += [f"barriersim.{top}.{p}" for p in find_packages(top)]

packages.append("barriersim.scenarios.large")  # scenario files only: a data package, listed so setuptools ships it

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "barriersim.scenarios": ["*.toml"],
        "barriersim.scenarios.large": ["*.toml"],
        "barriersim.spark": ["log4j2.properties"],
    },
)
