"""Prints N lines as fast as Python can: bench/logs.py's producer."""

import sys

count = int(sys.argv[1])
tag = sys.argv[2]
write = sys.stdout.write
for i in range(count):
    write(f"{tag} line {i:09d} loss: 0.{i % 9973:04d} the quick brown fox jumps over the lazy dog\n")
