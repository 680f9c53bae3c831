// Boost.JSON's compiled part, built once here: Debian 12 packages Boost.JSON
// as headers only (no libboost_json), and json_body.cc's parser needs its
// error categories.
//
// Thread-safety: not applicable (library code).
#include <boost/json/src.hpp>
