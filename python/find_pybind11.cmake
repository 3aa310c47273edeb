# pybind11 for Debian's /usr/bin/python3 (3.11): the interpreter that sees python3-torch. A
# python3 first on PATH may be another one (toolchain.md, item 18), so the interpreter is named
# before pybind11 looks for one. Included by python/ and tests/pytorch/ (which is configured
# first and must know whether the package will be built); sets pybind11_FOUND.
set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "the Python that runs orrery jobs")
set(PYTHON_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "the Python that runs orrery jobs")
set(PYBIND11_PYTHON_VERSION 3.11 CACHE STRING "the Python version of orrery's module")
find_package(pybind11 CONFIG QUIET)
