// The chaos harness's scripted model (dexchaos provider, docs/provider.md)
// driven by the providers' own SDKs through their baseURL options: a tool-call
// round trip and a streamed text answer on each endpoint, as a user's Worker
// would make them. dexchaos comes from $DEX_BIN, else it is built with go.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { binDir } from "./cluster.js";

const repo = resolve(import.meta.dirname, "../../../../..");
const canBuild = existsSync(join(repo, "go.mod")) && spawnSync("go", ["version"], { stdio: "ignore" }).status === 0;
const haveBin = existsSync(join(binDir, "dexchaos"));
const skip = haveBin || canBuild ? false : `no dexchaos in ${binDir} and no go to build one`;

const weather = [
  { tool_calls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
  { text: "Sunny in Paris." },
];
const script = {
  turns: [
    { contains: "chat weather", outputs: weather },
    { contains: "responses weather", outputs: weather },
    { contains: "claude weather", outputs: weather },
    { prefix: "tell me a story", outputs: [{ text: "Once upon a time, a Worker was killed and came back." }] },
    { contains: "flaky", errors: [{ output: 0, status: 500 }], outputs: [{ text: "after a retry" }] },
  ],
};
const story = "Once upon a time, a Worker was killed and came back.";

const weatherTool = {
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

describe("the scripted model through the providers' SDKs", { skip }, () => {
  let dir: string;
  let proc: ChildProcess;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let logPath: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dexprovider-"));
    let bin = join(binDir, "dexchaos");
    if (!haveBin) {
      bin = join(dir, "dexchaos");
      const b = spawnSync("go", ["build", "-o", bin, "./cmd/dexchaos"], { cwd: repo, encoding: "utf8", timeout: 600_000 });
      assert.equal(b.status, 0, `go build ./cmd/dexchaos: ${b.stderr}`);
    }
    writeFileSync(join(dir, "script.json"), JSON.stringify(script));
    logPath = join(dir, "calls.jsonl");
    proc = spawn(bin, ["provider", "--script", join(dir, "script.json"), "--addr", "127.0.0.1:0", "--log", logPath],
      { stdio: ["ignore", "pipe", "inherit"] });
    const env: Record<string, string> = {};
    for await (const line of createInterface({ input: proc.stdout! })) {
      const [k, v] = line.split("=", 2);
      env[k] = v;
      if (env.OPENAI_BASE_URL && env.ANTHROPIC_BASE_URL) break;
    }
    assert.match(env.OPENAI_BASE_URL ?? "", /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    openai = new OpenAI({ apiKey: "unused", baseURL: env.OPENAI_BASE_URL, maxRetries: 2 });
    anthropic = new Anthropic({ apiKey: "unused", baseURL: env.ANTHROPIC_BASE_URL, maxRetries: 2 });
  });

  after(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      await new Promise<void>((res) => { proc.once("exit", () => res()); proc.kill("SIGTERM"); });
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("chat completions: a tool call, its result, then the answer", async () => {
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "chat weather in Paris?" }];
    const tools: OpenAI.Chat.ChatCompletionTool[] = [{ type: "function", function: weatherTool }];
    const first = await openai.chat.completions.create({ model: "m", messages, tools });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    const call = choice.message.tool_calls![0];
    assert.equal(call.type, "function");
    if (call.type !== "function") return;
    assert.equal(call.function.name, "get_weather");
    assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
    messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: "sunny" });
    const second = await openai.chat.completions.create({ model: "m", messages, tools });
    assert.equal(second.choices[0].message.content, "Sunny in Paris.");
  });

  it("chat completions: a streamed tool call and a streamed answer", async () => {
    const stream = await openai.chat.completions.create({
      model: "m", stream: true, messages: [{ role: "user", content: "chat weather, streamed" }],
      tools: [{ type: "function", function: weatherTool }],
    });
    let name = "", args = "", finish = "";
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += tc.function?.name ?? "";
        args += tc.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(name, "get_weather");
    assert.deepEqual(JSON.parse(args), { city: "Paris" });
    assert.equal(finish, "tool_calls");

    const text = await openai.chat.completions.create({
      model: "m", stream: true, messages: [{ role: "user", content: "tell me a story" }],
    });
    let got = "";
    for await (const chunk of text) got += chunk.choices[0]?.delta.content ?? "";
    assert.equal(got, story);
  });

  it("responses: a function call, its output, then a streamed answer", async () => {
    const input: OpenAI.Responses.ResponseInput = [{ role: "user", content: "responses weather in Paris?" }];
    const tools: OpenAI.Responses.Tool[] = [{ type: "function", strict: true, ...weatherTool }];
    const first = await openai.responses.create({ model: "m", input, tools });
    const call = first.output.find((o) => o.type === "function_call");
    assert.ok(call && call.type === "function_call", JSON.stringify(first.output));
    assert.equal(call.name, "get_weather");
    assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
    input.push(call, { type: "function_call_output", call_id: call.call_id, output: "sunny" });
    const stream = await openai.responses.create({ model: "m", input, tools, stream: true });
    let got = "", completed = "";
    for await (const ev of stream) {
      if (ev.type === "response.output_text.delta") got += ev.delta;
      if (ev.type === "response.completed") {
        for (const o of ev.response.output) {
          if (o.type === "message") for (const c of o.content) if (c.type === "output_text") completed += c.text;
        }
      }
    }
    assert.equal(got, "Sunny in Paris.");
    assert.equal(completed, "Sunny in Paris.");
  });

  it("messages: a tool use, its result, then a streamed answer", async () => {
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "claude weather in Paris?" }];
    const tools: Anthropic.Tool[] = [{ name: weatherTool.name, description: weatherTool.description, input_schema: weatherTool.parameters as Anthropic.Tool.InputSchema }];
    const first = await anthropic.messages.stream({ model: "c", max_tokens: 100, messages, tools }).finalMessage();
    assert.equal(first.stop_reason, "tool_use");
    const use = first.content.find((b) => b.type === "tool_use");
    assert.ok(use && use.type === "tool_use");
    assert.equal(use.name, "get_weather");
    assert.deepEqual(use.input, { city: "Paris" });
    messages.push({ role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] });
    const second = await anthropic.messages.create({ model: "c", max_tokens: 100, messages, tools });
    assert.deepEqual(second.content, [{ type: "text", text: "Sunny in Paris." }]);

    let streamed = "";
    const s = anthropic.messages.stream({ model: "c", max_tokens: 100, messages: [{ role: "user", content: "tell me a story" }] });
    s.on("text", (t) => { streamed += t; });
    const final = await s.finalMessage();
    assert.equal(streamed, story);
    assert.equal(final.stop_reason, "end_turn");
  });

  it("a scripted 500 is retried by the SDK and counted as a call", async () => {
    const r = await anthropic.messages.create({ model: "c", max_tokens: 10, messages: [{ role: "user", content: "a flaky call" }] });
    assert.deepEqual(r.content, [{ type: "text", text: "after a retry" }]);
    const calls = readFileSync(logPath, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      .filter((c) => c.conversation === "a flaky call");
    assert.deepEqual(calls.map((c) => c.status), [500, 200]);
  });
});
