// Boost.JSON's compiled part, built once here: Debian 12 packages Boost.JSON
// as headers only (no libboost_json), and its users (the REST gateway's
// body parser, the stored agent inventories) need its error categories.
//
// Thread-safety: not applicable (library code).
#include <boost/json/src.hpp>
