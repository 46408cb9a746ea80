"""HTTP routes declared comfy-env's way (a ROUTES list of a submodule): each handler runs in the
worker with the request's JSON body and answers JSON; "_status" is the HTTP status."""

import os

ROUTES = [
    {"method": "POST", "path": "/orchdemo/echo", "handler": "echo"},
    {"method": "GET", "path": "/orchdemo/where", "handler": "where"},
    {"method": "POST", "path": "/orchdemo/refuse", "handler": "refuse"},
    {"method": "POST", "path": "/orchdemo/broken", "handler": "broken"},
    {"method": "POST", "path": "/orchdemo/missing", "handler": "no_such_function"},
]


def echo(body):
    return {"echo": body, "pid": os.getpid(), "greeting": os.environ.get("DEMO_A_GREETING")}


def where(body):
    return {"pid": os.getpid(), "query": body}


def refuse(body):
    return {"_status": 422, "error": "refused: %s" % body.get("why")}


def broken(body):
    raise ValueError("the handler failed on purpose")
