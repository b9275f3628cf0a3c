// "Did you mean": the option of a CLI11 app nearest to one the user typed,
// for the error of an unknown option (issue 27: a typo said only "not
// expected"). Used by blkmq bench and blkmq reproduce.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace bench {

// For a CLI11 parse error: its message, and when it names an unexpected
// option within two edits of one of `app`'s long options, " (did you mean
// --NAME?)" after it. Any thread; cost: one edit distance per option.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e);

// The long option of `app` nearest to `typed` ("--irqmod=1" or "irqmod"),
// within two edits and less than half its length; "" when none is.
std::string nearest_option(const CLI::App& app, const std::string& typed);

}  // namespace bench
