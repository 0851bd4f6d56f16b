// The engine's answers in a differential run, one JSON line each, written where
// VENEER_JUDGE_ANSWERS names a file. A change meant to change no decision (a refactor) is checked
// by two runs at one seed, before and after, and a diff of their files: every answer, abstentions
// and their reasons included, not only those the judge checks.
import { appendFileSync } from 'node:fs';

const FILE = process.env.VENEER_JUDGE_ANSWERS;

export function logAnswer(judge: string, id: string, answer: unknown): void {
  if (FILE === undefined || FILE === '') return;
  appendFileSync(FILE, `${JSON.stringify({ judge, id, answer })}\n`);
}
