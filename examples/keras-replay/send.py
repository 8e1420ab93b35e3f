"""Production traffic for the example: N requests of raw readings (data.production) sent to a served
model (`tftrain serve keras-replay@v1 --record replay/recorded`), one reading per request.

    python send.py http://127.0.0.1:8080 [--requests 200]
"""

import argparse
import json
import urllib.request

import data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url", help="the served model's base URL, as `tftrain serve` prints it")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--name", default="keras-replay")
    args = parser.parse_args()
    answered = 0
    for reading in data.production(args.requests):
        body = json.dumps({"instances": [[round(float(v), 3) for v in reading]]}).encode()
        request = urllib.request.Request(
            f"{args.url}/v1/models/{args.name}:predict", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            answered += answer.status == 200
    print(f"{answered} of {args.requests} requests answered")


if __name__ == "__main__":
    main()
