// What the Open MPI references share: the library's name and version for their headers.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace orbite::perf {

// "Open MPI v4.1.4": MPI_Get_library_version's first line, up to its first comma.
inline std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<std::size_t>(len));
  return v.substr(0, v.find_first_of(",\n"));
}

}  // namespace orbite::perf
