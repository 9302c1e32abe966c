"""The command-line front door: argparse in front of the same service."""
