"""One module per `capsule` subcommand (or group): parse options, call a library function, print."""
