#!/usr/bin/env python3
"""grammar-validity.py -- valid by construction: hearth run samples at
temperature 1 from random-weight models (whose text is otherwise noise)
under JSON Schemas and GBNF grammars, and every output is checked by an
independent judge: Python's json and the jsonschema package's validator
for the schemas, a recogniser written here for each grammar.  Every
sample must end where the grammar allows (a finish reason of "stop" or
"eos", never the token limit, which the corpus keeps out of reach) and be
accepted.  Exit 77 (skipped) when jsonschema or the models are missing.

Usage: grammar-validity.py HEARTH DATA_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("grammar-validity: python3-jsonschema is not installed; skipped", file=sys.stderr)
    sys.exit(77)

hearth, data = sys.argv[1], sys.argv[2]
models = [os.path.join(data, "models", m) for m in ("micro-llama-F16.gguf", "micro-qwen2-Q8_0.gguf")]
if not all(os.path.exists(m) for m in models):
    print("grammar-validity: the shared models are missing; skipped", file=sys.stderr)
    sys.exit(0 if os.environ.get("CI") else 77)
SEEDS = range(1, 6)

SCHEMAS = [
    {"type": "object",
     "properties": {"name": {"type": "string", "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "admin": {"type": "boolean"}},
     "required": ["name", "age"]},
    {"type": "object",
     "properties": {"id": {"type": "string", "format": "uuid"},
                    "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                             "minItems": 1, "maxItems": 4},
                    "score": {"type": "number"}},
     "required": ["id", "tags", "score"], "additionalProperties": False},
    {"type": "object",
     "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,4}(x|yz)?$"},
                    "when": {"type": "string", "format": "date"},
                    "level": {"const": "high"}},
     "required": ["code", "when", "level"]},
    # references (recursion too would let noise nest without end)
    {"$defs": {"node": {"type": "object",
                        "properties": {"v": {"type": "integer", "minimum": -20, "maximum": 20},
                                       "kids": {"type": "array", "items": {"$ref": "#/$defs/leaf"},
                                                "maxItems": 2}},
                        "required": ["v"]},
               "leaf": {"type": "object", "properties": {"w": {"enum": [1, 2]}}, "required": ["w"]}},
     "type": "object", "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"]},
    {"type": "array", "prefixItems": [{"type": "string", "maxLength": 5}, {"type": "integer"}],
     "items": False, "minItems": 2},
    {"anyOf": [{"type": "null"},
               {"type": "object", "properties": {"k": {"type": ["string", "null"], "maxLength": 4}},
                "required": ["k"]}]},
    {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"b": {"enum": [1, "two", None, True]}}, "required": ["b"]}]},
    {"type": "object",
     "properties": {"t": {"type": "string", "format": "date-time"},
                    "m": {"type": "object", "properties": {"x": {"type": "boolean"}}}},
     "required": ["t", "m"]},
]

# GBNF grammars with their recognisers.
ARITH = r'''
root   ::= expr
expr   ::= term (("+" | "-") term){0,3}
term   ::= factor (("*" | "/") factor){0,2}
factor ::= [0-9]{1,3} | "(" expr1 ")"
expr1  ::= term1 (("+" | "-") term1){0,3}
term1  ::= factor1 (("*" | "/") factor1){0,2}
factor1 ::= [0-9]{1,3}
'''

def arith_ok(s):
    pos = 0
    def number():
        nonlocal pos
        n = 0
        while pos < len(s) and s[pos].isdigit() and n < 3:
            pos += 1
            n += 1
        return n > 0
    def factor(depth):
        nonlocal pos
        if depth == 0 and pos < len(s) and s[pos] == "(":
            pos += 1
            if not expr(depth + 1) or pos >= len(s) or s[pos] != ")":
                return False
            pos += 1
            return True
        return number()
    def term(depth):
        nonlocal pos
        if not factor(depth):
            return False
        k = 0
        while k < 2 and pos < len(s) and s[pos] in "*/":
            pos += 1
            if not factor(depth):
                return False
            k += 1
        return True
    def expr(depth):
        nonlocal pos
        if not term(depth):
            return False
        k = 0
        while k < 3 and pos < len(s) and s[pos] in "+-":
            pos += 1
            if not term(depth):
                return False
            k += 1
        return True
    # a digit run of more than three or a greedy choice the grammar would
    # not make cannot occur in the grammar's language, so greedy is exact
    return expr(0) and pos == len(s)

LIST = r'''
root ::= "[" item (", " item){0,4} "]"
item ::= [a-z\u00e9]{1,6} | "'" [^'\n\\]{0,5} "'"
'''
LIST_RE = re.compile(r"\[(?:[a-zé]{1,6}|'[^'\n\\]{0,5}')(?:, (?:[a-zé]{1,6}|'[^'\n\\]{0,5}')){0,4}\]\Z")

PROG = r'''
root  ::= stmt{1,3}
stmt  ::= "let " ident " = " expr ";\n" | "if " expr " { " stmt{0,1} "}\n" | "print " expr ";\n"
expr  ::= atom (" " ("+" | "<" | "==") " " atom){0,2}
atom  ::= ident | [0-9]{1,2}
ident ::= [a-z] [a-z0-9_]{0,3}
'''

def prog_ok(s):
    pos = 0
    def lit(t):
        nonlocal pos
        if s.startswith(t, pos):
            pos += len(t)
            return True
        return False
    def atom():
        nonlocal pos
        m = re.compile(r"[a-z][a-z0-9_]{0,3}|[0-9]{1,2}").match(s, pos)
        if not m:
            return False
        pos = m.end()
        return True
    def expr():
        nonlocal pos
        if not atom():
            return False
        for _ in range(2):
            save = pos
            if lit(" ") and (lit("+") or lit("<") or lit("==")) and lit(" ") and atom():
                continue
            pos = save
            break
        return True
    def stmt(depth):
        nonlocal pos
        if depth > 20:
            return False
        if lit("let "):
            m = re.compile(r"[a-z][a-z0-9_]{0,3}").match(s, pos)
            if not m:
                return False
            pos = m.end()
            return lit(" = ") and expr() and lit(";\n")
        if lit("if "):
            if not expr() or not lit(" { "):
                return False
            if not s.startswith("}\n", pos):
                if not stmt(depth + 1):
                    return False
            return lit("}\n")
        if lit("print "):
            return expr() and lit(";\n")
        return False
    n = 0
    while pos < len(s) and n < 3:
        if not stmt(0):
            return False
        n += 1
    return n >= 1 and pos == len(s)

# (name, grammar, recogniser, whether its texts end in a newline)
GRAMMARS = [("arithmetic", ARITH, arith_ok, False),
            ("list", LIST, lambda s: LIST_RE.match(s) is not None, False),
            ("program", PROG, prog_ok, True)]

failures = 0
runs = 0

def run(model, seed, args):
    global runs
    runs += 1
    p = subprocess.run([hearth, "run", "-m", model, "-p", "Once upon a time", "--no-echo",
                        "--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                        "--seed", str(seed), "-n", "3000", "-t", "1"] + args,
                       capture_output=True)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        return None, "exit %d: %s" % (p.returncode, err[-500:])
    out = p.stdout.decode("utf-8")
    m = re.search(r"finish reason: (\w+)", err)
    reason = m.group(1) if m else "?"
    if reason not in ("stop", "eos"):
        return out, "finish reason %s (the grammar was not complete)" % reason
    return out, None

def text_of(out, ends_with_newline):
    """The generated text: hearth ends the text's line with a newline of its
    own only when the text does not end with one."""
    if not ends_with_newline and out.endswith("\n"):
        return out[:-1]
    return out

def fail(what, detail, out):
    global failures
    failures += 1
    print("FAIL: %s: %s\n  output: %r" % (what, detail, (out or "")[:400]), file=sys.stderr)

checker = jsonschema.FormatChecker()
with tempfile.TemporaryDirectory() as tmp:
    for i, schema in enumerate(SCHEMAS):
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
        path = os.path.join(tmp, "schema%d.json" % i)
        with open(path, "w") as f:
            json.dump(schema, f)
        for model in models:
            for seed in SEEDS:
                what = "schema %d, %s, seed %d" % (i, os.path.basename(model), seed)
                out, problem = run(model, seed, ["--json-schema", path])
                if problem:
                    fail(what, problem, out)
                    continue
                out = text_of(out, False)
                try:
                    value = json.loads(out)
                except ValueError as e:
                    fail(what, "not JSON: %s" % e, out)
                    continue
                errors = list(validator.iter_errors(value))
                if errors:
                    fail(what, "invalid: %s" % errors[0].message, out)
    for model in models:
        for seed in SEEDS:
            what = "JSON mode, %s, seed %d" % (os.path.basename(model), seed)
            out, problem = run(model, seed, ["--json"])
            if problem and "finish reason length" in problem:
                # JSON mode's strings and nesting are unbounded: noise may
                # not end within the limit; only complete objects are judged
                continue
            if problem:
                fail(what, problem, out)
                continue
            out = text_of(out, False)
            try:
                if not isinstance(json.loads(out), dict):
                    fail(what, "not an object", out)
            except ValueError as e:
                fail(what, "not JSON: %s" % e, out)
    for name, gbnf, ok, newline in GRAMMARS:
        for model in models:
            for seed in SEEDS:
                what = "grammar %s, %s, seed %d" % (name, os.path.basename(model), seed)
                out, problem = run(model, seed, ["--grammar", gbnf])
                if problem:
                    fail(what, problem, out)
                elif not ok(text_of(out, newline)):
                    fail(what, "the recogniser refuses it", out)

print("grammar-validity: %d samples, %d failures" % (runs, failures))
sys.exit(1 if failures else 0)
