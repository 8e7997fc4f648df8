"""The one compiled piece, optional: cuGraphLaunch from C for the replay hot path
(tracegraph/backends/cuda/_graphlaunch.c). Without a C compiler the install goes on and
replays launch through cuda.core."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("tracegraph.backends.cuda._graphlaunch",
                             ["tracegraph/backends/cuda/_graphlaunch.c"],
                             libraries=["dl"], optional=True)])
