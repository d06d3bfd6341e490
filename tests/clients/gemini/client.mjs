// A client of the Gemini API on Google's Gen AI SDK, pointed at a model server by its base
// URL (argv[2]): a streamed first turn, then the second turn whole, with the first turn's
// reply and the tool's result in the conversation. Prints what it read as one JSON line.
import { GoogleGenAI } from "@google/genai";

const ai = new GoogleGenAI({ apiKey: "any", httpOptions: { baseUrl: process.argv[2] } });
const user = { role: "user", parts: [{ text: "Leave a note" }] };
const tools = [{ functionDeclarations: [{ name: "write_file", description: "Writes a file." }] }];

const first = { thought: "", text: "", calls: [], finish: null };
const stream = await ai.models.generateContentStream({ model: "kit", contents: [user], config: { tools } });
for await (const chunk of stream) {
  const candidate = chunk.candidates?.[0];
  for (const part of candidate?.content?.parts ?? []) {
    if (part.functionCall) first.calls.push(part.functionCall);
    else if (part.thought) first.thought += part.text;
    else if (part.text) first.text += part.text;
  }
  if (candidate?.finishReason) first.finish = candidate.finishReason;
}

const call = first.calls[0] ?? { name: "write_file", args: {} };
const second = await ai.models.generateContent({
  model: "kit",
  contents: [
    user,
    { role: "model", parts: [{ functionCall: call }] },
    { role: "user", parts: [{ functionResponse: { name: call.name, response: { ok: true } } }] },
  ],
  config: { tools },
});

console.log(JSON.stringify({
  first,
  second: { text: second.text, usage: second.usageMetadata?.totalTokenCount ?? null },
}));
