/** The workspace state: a real key-value store in memory, as VS Code's Memento behaves. */
export class MemoryMemento {
  private readonly values = new Map<string, unknown>();
  keys(): string[] {
    return [...this.values.keys()];
  }
  get<T>(key: string, fallback?: T): T | undefined {
    return this.values.has(key) ? structuredClone(this.values.get(key) as T) : fallback;
  }
  async update(key: string, value: unknown): Promise<void> {
    this.values.set(key, structuredClone(value));
  }
}
