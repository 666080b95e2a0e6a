// The owner of the tests' precompiled header (support/pch.h): a library of nothing else.
