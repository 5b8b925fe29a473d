// llama.cpp's own view of a GGUF file, for bashgym_assets/export/llama_cpp.py: load it with node-llama-cpp's
// PREBUILT linux-x64 CPU binary (never a GPU, never a build from source, never a download: it fails loudly instead),
// tokenize texts, detokenize the tokens, and generate greedily from prompts. One JSON object in on stdin, one out
// on stdout:
//   in:  {"model": PATH, "texts": [STR], "prompts": [STR], "max_new_tokens": N, "stop_tokens": [ID],
//         "forced": [[ID]] (optional, one reference continuation per prompt), "threads": N}
//   out: {"llama_cpp": {...}, "texts": [{"tokens": [ID], "detokenized": STR}],
//         "prompts": [{"prompt_tokens": [ID], "tokens": [ID], "forced_next": [ID]}]}
// Texts and prompts are tokenized with special tokens parsed (as llama.cpp does a chat prompt) and without an
// added BOS (transformers is asked for the same: add_special_tokens=False). Generation stops after a token in stop_tokens (which is
// kept, as transformers keeps its eos) or after max_new_tokens: only the caller's stop tokens end it, so the two
// token streams compare one for one (llama.cpp's own end-of-generation set is larger). With "forced", the
// reference continuation is fed token by token (teacher forcing) and forced_next[i] is llama.cpp's greedy choice
// after the prompt and the reference's first i tokens: agreement that one near-tie cannot derail, as it derails a
// free-running reply.
// `node llama_check.mjs --probe` only loads the binary and prints {"llama_cpp": {...}} (scripts/setup.sh runs it).
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function readStdin() {
    return new Promise((resolve, reject) => {
        let data = "";
        process.stdin.setEncoding("utf8");
        process.stdin.on("data", (chunk) => { data += chunk; });
        process.stdin.on("end", () => resolve(data));
        process.stdin.on("error", reject);
    });
}

const probe = process.argv.includes("--probe");
const request = probe ? {} : JSON.parse(await readStdin());
const threads = Math.max(1, request.threads ?? 1);
const llama = await getLlama({
    gpu: false,                  // CPU only, whatever the machine has
    build: "never",              // the prebuilt binary or a NoBinaryFoundError, never cmake
    skipDownload: true,          // never fetch llama.cpp's source
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    maxThreads: threads,
});
if (llama.buildType !== "prebuilt" || llama.gpu !== false) {
    throw new Error(`expected node-llama-cpp's prebuilt CPU binary, got build ${llama.buildType}, gpu ${llama.gpu}`);
}
const info = {release: llama.llamaCppRelease.release, build: llama.buildType, gpu: llama.gpu, threads};
if (probe) {
    await llama.dispose();
    process.stdout.write(JSON.stringify({llama_cpp: info}) + "\n");
    process.exit(0);
}
const model = await llama.loadModel({modelPath: request.model, gpuLayers: 0});
const out = {llama_cpp: info, texts: [], prompts: []};
for (const text of request.texts ?? []) {
    const tokens = model.tokenize(text, true);
    out.texts.push({tokens, detokenized: model.detokenize(tokens, true)});
}
const prompts = request.prompts ?? [];
if (prompts.length > 0) {
    const stop = new Set(request.stop_tokens ?? []);
    const maxNew = request.max_new_tokens ?? 24;
    const context = await model.createContext({contextSize: request.context_size ?? 2048, sequences: 2, threads});
    const free = context.getSequence();     // free-running greedy replies
    const teacher = context.getSequence();  // teacher-forced next-token choices
    const greedy = {generateNext: {token: true, options: {temperature: 0}}};
    for (const [index, prompt] of prompts.entries()) {
        const promptTokens = model.tokenize(prompt, true);
        const tokens = [];
        await free.clearHistory();
        if (maxNew > 0 && promptTokens.length > 0) {
            for await (const token of free.evaluate(promptTokens, {temperature: 0, yieldEogToken: true})) {
                tokens.push(token);
                if (stop.has(token) || tokens.length >= maxNew) break;
            }
        }
        const forced = (request.forced ?? [])[index] ?? [];
        const forcedNext = [];
        if (forced.length > 0 && promptTokens.length > 0) {
            await teacher.clearHistory();
            const input = [...promptTokens.slice(0, -1), [promptTokens[promptTokens.length - 1], greedy],
                ...forced.slice(0, -1).map((token) => [token, greedy])];
            for (const result of await teacher.controlledEvaluate(input)) {
                if (result?.next?.token != null) forcedNext.push(result.next.token);
            }
        }
        out.prompts.push({prompt_tokens: promptTokens, tokens, forced_next: forcedNext});
    }
    await context.dispose();
}
await model.dispose();
await llama.dispose();
process.stdout.write(JSON.stringify(out) + "\n");
