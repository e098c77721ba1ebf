//! Empty: this package only pins the sources of scripts/gen-protobuf-tables.py.
