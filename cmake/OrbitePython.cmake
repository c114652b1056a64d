# The Python package `orbite` (docs/python.md): orbite._core, a pybind11 module built with
# Debian's pybind11 for Debian's interpreter. The python3 first on PATH may be another one that
# cannot see Debian's packages (numpy, pytest, torch), so /usr/bin/python3 is pinned unless
# Python3_EXECUTABLE says otherwise. ORBITE_WITH_PYTHON is on when both are found.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH
      "The interpreter the Python package is built for (Debian's sees Debian's packages)")
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
set(PYBIND11_FINDPYTHON ON)
find_package(pybind11 2.10 CONFIG QUIET)
set(_orbite_python_default OFF)
if(Python3_FOUND AND pybind11_FOUND)
  set(_orbite_python_default ON)
endif()
option(ORBITE_WITH_PYTHON "The orbite Python package (needs pybind11-dev and python3-dev)"
       ${_orbite_python_default})
if(ORBITE_WITH_PYTHON AND NOT (Python3_FOUND AND pybind11_FOUND))
  message(FATAL_ERROR "ORBITE_WITH_PYTHON=ON but Python3 development files or pybind11 were "
                      "not found (scripts/install-deps.sh installs them)")
endif()

# orbite._torch, the torch.distributed backend "orbite" (docs/python.md): built when Debian's
# libtorch-dev is found (find_package(Torch) needs no hints there). ORBITE_WITH_TORCH is on then.
set(_orbite_torch_default OFF)
if(ORBITE_WITH_PYTHON)
  find_package(Torch QUIET)
  if(Torch_FOUND OR TORCH_FOUND)
    set(_orbite_torch_default ON)
  endif()
endif()
option(ORBITE_WITH_TORCH "The torch.distributed backend (needs libtorch-dev and the Python package)"
       ${_orbite_torch_default})
if(ORBITE_WITH_TORCH AND NOT ORBITE_WITH_PYTHON)
  message(FATAL_ERROR "ORBITE_WITH_TORCH=ON needs ORBITE_WITH_PYTHON=ON")
endif()
if(ORBITE_WITH_TORCH AND NOT (Torch_FOUND OR TORCH_FOUND))
  find_package(Torch REQUIRED)
endif()
