/** The load run (docs/scaling.md, "The load run"): see runLoad. */
export async function runLoad(): Promise<void> {
  throw new Error('the load run is not written yet');
}
