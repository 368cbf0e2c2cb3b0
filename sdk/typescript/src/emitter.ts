/** A minimal typed event emitter (works in browsers and Node alike). */
export class Emitter<Events extends { [K in keyof Events]: (...args: never[]) => void }> {
  private handlers = new Map<keyof Events, Set<Events[keyof Events]>>();

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(event: K, fn: Events[K]): () => void {
    let set = this.handlers.get(event);
    if (!set) this.handlers.set(event, (set = new Set()));
    set.add(fn);
    return () => this.off(event, fn);
  }

  off<K extends keyof Events>(event: K, fn: Events[K]): void {
    this.handlers.get(event)?.delete(fn);
  }

  protected emit<K extends keyof Events>(event: K, ...args: Parameters<Events[K]>): void {
    const set = this.handlers.get(event);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        (fn as (...a: Parameters<Events[K]>) => void)(...args);
      } catch (err) {
        // A failing listener must not break delivery to the others.
        setTimeout(() => {
          throw err;
        });
      }
    }
  }
}
