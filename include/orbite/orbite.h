// Everything of the OrbiTE public API except the optional MPI bootstrap (orbite/mpi.h).
#pragma once

#include <orbite/bootstrap.h>
#include <orbite/communicator.h>
#include <orbite/config.h>
#include <orbite/info.h>
#include <orbite/status.h>
#include <orbite/store.h>
#include <orbite/version.h>
