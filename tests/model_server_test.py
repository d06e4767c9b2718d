#!/usr/bin/env python3
"""The model server installed with agtd (guest/tools/model_server.py), over HTTP: each API's
stream, event by event, as the real service sends it; the agent's own write tool with its
own argument names; the final answer after a tool result; JSON by a schema (gemini's
router).  TAP.  (The real agents against it: `agt verify --agent all`,
tests/e2e/verify-agents.sh.)

usage: model_server_test.py PATH_OF_THE_SERVER
"""
import http.client
import json
import subprocess
import sys

N = 0
FAILED = 0


def ok(cond, what):
    global N, FAILED
    N += 1
    if not cond:
        FAILED += 1
    print(("ok" if cond else "not ok") + f" {N} - {what}", flush=True)


def post(port, path, body, stream=True):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    te = r.getheader("Transfer-Encoding")
    ctype = r.getheader("Content-Type")
    c.close()
    return r.status, ctype, te, data


def sse(data):
    """[(event name or None, parsed data or the raw string)]"""
    out = []
    for block in data.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, payload = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        out.append((name, payload if payload == "[DONE]" else json.loads(payload)))
    return out


def main():
    srv = subprocess.Popen([sys.argv[1], "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline().strip().rsplit(":", 1)[1])
    try:
        run(port)
    finally:
        srv.terminate()
        srv.wait()
    print(f"1..{N}")
    return 1 if FAILED else 0


def run(port):
    prompt = "AGT-WRITE /work/out.txt word-1"
    path_schema = lambda k: {"type": "object", "properties": {k: {"type": "string"}, "content": {"type": "string"}}}
    shell = {"type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}}

    # --- Anthropic Messages (claude): Write {file_path, content}
    tools = [{"name": "Bash", "input_schema": shell}, {"name": "Write", "input_schema": path_schema("file_path")}]
    st, ct, te, d = post(port, "/v1/messages?beta=true", {"model": "m", "stream": True, "tools": tools,
                                                          "messages": [{"role": "user", "content": prompt}]})
    ev = sse(d)
    ok(st == 200 and ct == "text/event-stream" and te == "chunked", "messages: an SSE stream in HTTP chunks")
    ok([e[0] for e in ev] == ["message_start", "content_block_start", "ping", "content_block_delta",
                              "content_block_stop", "message_delta", "message_stop"],
       "messages: the event sequence of a tool_use answer")
    ok(all(e[1]["type"] == e[0] for e in ev), "messages: each data's type is its event's name")
    blk = ev[1][1]["content_block"]
    args = json.loads(ev[3][1]["delta"]["partial_json"])
    ok(blk["type"] == "tool_use" and blk["name"] == "Write" and blk["input"] == {} and
       ev[3][1]["delta"]["type"] == "input_json_delta", "messages: tool_use Write, its input as input_json_delta")
    ok(args == {"file_path": "/work/out.txt", "content": "word-1"}, "messages: Write's own argument names")
    ok(ev[5][1]["delta"]["stop_reason"] == "tool_use", "messages: stop_reason tool_use")
    st, ct, te, d = post(port, "/v1/messages", {"model": "m", "stream": True, "tools": tools, "messages": [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Write", "input": args}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]})
    ev = sse(d)
    ok(ev[1][1]["content_block"]["type"] == "text" and ev[3][1]["delta"] == {"type": "text_delta", "text": "done: tool ran"}
       and ev[5][1]["delta"]["stop_reason"] == "end_turn", "messages: after the tool result, a text answer")
    st, ct, te, d = post(port, "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    m = json.loads(d)
    ok(st == 200 and m["type"] == "message" and m["content"][0]["type"] == "text", "messages: without stream, one JSON message")

    # --- OpenAI Responses (codex): exec_command {cmd}
    tools = [{"type": "function", "name": "exec_command",
              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
    st, ct, te, d = post(port, "/v1/responses", {"model": "m", "stream": True, "tools": tools,
                                                 "input": [{"type": "message", "role": "user",
                                                            "content": [{"type": "input_text", "text": prompt}]}]})
    ev = sse(d)
    ok(st == 200 and te == "chunked", "responses: an SSE stream in HTTP chunks")
    ok([e[0] for e in ev] == ["response.created", "response.in_progress", "response.output_item.added",
                              "response.function_call_arguments.delta", "response.function_call_arguments.done",
                              "response.output_item.done", "response.completed"],
       "responses: the event sequence of a function call")
    ok([e[1]["sequence_number"] for e in ev] == list(range(len(ev))), "responses: sequence numbers 0, 1, ...")
    item = ev[-1][1]["response"]["output"][0]
    ok(item["type"] == "function_call" and item["name"] == "exec_command" and
       json.loads(item["arguments"]) == {"cmd": "printf %s word-1 > /work/out.txt"},
       "responses: exec_command {cmd} running printf")
    ok(ev[-1][1]["response"]["status"] == "completed" and ev[-1][1]["response"]["usage"]["total_tokens"] == 2,
       "responses: completed, with usage")
    st, ct, te, d = post(port, "/v1/responses", {"model": "m", "stream": True, "tools": tools, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
        {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"}]})
    ev = sse(d)
    ok([e[0] for e in ev][2:7] == ["response.output_item.added", "response.content_part.added",
                                   "response.output_text.delta", "response.output_text.done",
                                   "response.content_part.done"] and ev[4][1]["delta"] == "done: tool ran",
       "responses: after the function's output, a text message")

    # --- OpenAI chat completions (pi: write {path}; opencode: write {filePath})
    for key in ("path", "filePath"):
        tools = [{"type": "function", "function": {"name": "bash", "parameters": shell}},
                 {"type": "function", "function": {"name": "write", "parameters": path_schema(key)}}]
        st, ct, te, d = post(port, "/v1/chat/completions", {"model": "m", "stream": True, "tools": tools,
                                                            "stream_options": {"include_usage": True},
                                                            "messages": [{"role": "user", "content": prompt}]})
        ev = sse(d)
        ok(st == 200 and te == "chunked" and ev[-1][1] == "[DONE]", f"chat ({key}): SSE ending in [DONE]")
        calls = [c for e in ev[:-1] for ch in e[1]["choices"] for c in ch["delta"].get("tool_calls", [])]
        ok(calls[0]["function"]["name"] == "write" and calls[0]["function"]["arguments"] == "" and
           json.loads("".join(c["function"]["arguments"] for c in calls)) == {key: "/work/out.txt", "content": "word-1"},
           f"chat ({key}): the write tool's name first, then its arguments, as deltas")
        ok([ch["finish_reason"] for e in ev[:-1] for ch in e[1]["choices"]][-1] == "tool_calls" and
           ev[-2][1]["choices"] == [] and ev[-2][1]["usage"]["total_tokens"] == 2,
           f"chat ({key}): finish_reason tool_calls, then the usage chunk")
    st, ct, te, d = post(port, "/v1/chat/completions", {"model": "m", "tools": tools, "messages": [
        {"role": "user", "content": prompt}, {"role": "tool", "tool_call_id": "c", "content": "ok"}]})
    ok(json.loads(d)["choices"][0]["message"]["content"] == "done: tool ran", "chat: after the tool, a text answer (JSON)")
    two = "AGT-WRITE out.txt a"
    st, ct, te, d = post(port, "/v1/chat/completions", {"model": "m", "tools": [
        {"type": "function", "function": {"name": "bash", "parameters": shell}}], "messages": [{"role": "user", "content": two}]})
    c = json.loads(d)["choices"][0]["message"]["tool_calls"][0]["function"]
    ok(c["name"] == "bash" and json.loads(c["arguments"]) == {"command": "printf %s a > out.txt", "description": "write a file"},
       "chat: with only a shell tool, bash {command, description}")

    # --- Gemini: the router's JSON, then streamGenerateContent with write_file {file_path}
    st, ct, te, d = post(port, "/v1beta/models/m:generateContent", {
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "object", "properties": {"complexity_reasoning": {"type": "string"},
                                             "complexity_score": {"type": "integer"}}}}})
    r = json.loads(d)
    ok(json.loads(r["candidates"][0]["content"]["parts"][0]["text"]) == {"complexity_reasoning": "simple", "complexity_score": 1},
       "gemini: the router's JSON, filled from its schema")
    tools = [{"functionDeclarations": [{"name": "write_file", "parametersJsonSchema": path_schema("file_path")}]}]
    st, ct, te, d = post(port, "/v1beta/models/m:streamGenerateContent?alt=sse", {
        "contents": [{"role": "user", "parts": [{"text": prompt}]}], "tools": tools})
    ok(st == 200 and te == "chunked" and "\r\n\r\n" in d, "gemini: SSE in chunks, events ending in CRLF CRLF")
    ev = sse(d)
    part = ev[0][1]["candidates"][0]["content"]["parts"][0]
    ok(part == {"functionCall": {"name": "write_file", "args": {"file_path": "/work/out.txt", "content": "word-1"}}},
       "gemini: functionCall write_file {file_path, content}")
    st, ct, te, d = post(port, "/v1beta/models/m:streamGenerateContent?alt=sse", {"tools": tools, "contents": [
        {"role": "user", "parts": [{"text": prompt}]}, {"role": "model", "parts": [part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "write_file", "response": {"output": "ok"}}}]}]})
    ok(sse(d)[0][1]["candidates"][0]["content"]["parts"][0] == {"text": "done: tool ran"},
       "gemini: after the function's response, a text answer")


if __name__ == "__main__":
    sys.exit(main())
