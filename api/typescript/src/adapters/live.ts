// Live output of an adapter's RunModel (docs/design/streaming.md): the
// framework's text deltas go to input.stream as they come, and the output
// the adapter returns is the concatenation of what it streamed.
//
// An adapter's final text is the framework's, exactly as without streaming
// (the OpenAI Agents and Claude Agent SDK adapters join its pieces, message
// parts or text blocks, with a newline). LiveText streams that separator
// before the first delta of each new piece, and at each sync streams what
// the final text so far adds to the stream (a piece the framework did not
// stream). Should a framework answer text other than what it streamed (it
// asked the model again after streaming part of an answer), the committed
// result, which watchers are told replaces the stream, is the framework's
// final text, and nothing more is streamed.

/** The text one RunModel streamed, and its sending through input.stream. */
export class LiveText {
  /** What was streamed so far. */
  text = "";
  private diverged = false;
  private fresh = false;

  /** send: input.stream, or undefined when nothing streams. sep joins the pieces of the final text. */
  constructor(private readonly send: ((text: string) => void) | undefined, private readonly sep = "\n") {}

  /** A new piece of the final text starts: its first delta goes after sep (unless nothing was streamed yet). */
  piece(): void {
    this.fresh = true;
  }

  /** Streams a delta of the current piece. */
  delta(text: string): void {
    if (this.send === undefined || this.diverged || typeof text !== "string" || text === "") return;
    const out = this.fresh && this.text !== "" ? this.sep + text : text;
    this.fresh = false;
    this.text += out;
    this.send(out);
  }

  /**
   * Catches the stream up with final, the framework's text so far (or
   * whole): streams what final adds to what was streamed. Returns final.
   */
  sync(final: string): string {
    if (this.send === undefined || this.diverged) return final;
    if (!final.startsWith(this.text)) {
      this.diverged = true;
      return final;
    }
    const rest = final.slice(this.text.length);
    if (rest !== "") {
      this.text = final;
      this.send(rest);
    }
    return final;
  }
}
