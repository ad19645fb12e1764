import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The documentation as a newcomer meets it: a README short enough to read (what it is, quick
 * start, SDK examples, configuration, libraries, where to go next), the manual, operations and
 * design under docs/, and no relative link, in the README or in docs/, that leads nowhere.
 */
const ROOT = resolve(__dirname, '..');
const README_MAX_LINES = 400;

function markdownUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownUnder(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

const README = join(ROOT, 'README.md');
const PAGES = [README, ...markdownUnder(join(ROOT, 'docs'))];

/** The text outside fenced code blocks, line by line (a link or heading in a code block is an example). */
function proseLines(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const opening = /^\s*(`{3,}|~{3,})/.exec(line);
    if (opening && (fence === null || opening[1].startsWith(fence))) {
      fence = fence === null ? opening[1] : null;
      return '';
    }
    return fence === null ? line : '';
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingAnchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const plain = heading[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Every link target of the page's prose: inline links and images, and reference definitions. */
function linkTargets(text: string): string[] {
  const prose = proseLines(text)
    .map((line) => line.replace(/`[^`]*`/g, '``'))
    .join('\n');
  const inline = [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]);
  const references = [...prose.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)].map((m) => m[1]);
  return [...inline, ...references];
}

/** What is wrong with each relative link of a page: a missing file, or a missing heading of a Markdown file. */
function brokenLinks(page: string): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(readFileSync(page, 'utf8'))) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
    const [path, fragment] = target.split('#', 2);
    const file = path === '' ? page : resolve(dirname(page), decodeURIComponent(path));
    if (!existsSync(file)) {
      broken.push(`${target}: no file ${relative(ROOT, file)}`);
      continue;
    }
    if (fragment && file.endsWith('.md') && !headingAnchors(readFileSync(file, 'utf8')).has(decodeURIComponent(fragment))) {
      broken.push(`${target}: no heading #${fragment} in ${relative(ROOT, file)}`);
    }
  }
  return broken;
}

describe('documentation', () => {
  it(`keeps the README at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(README, 'utf8').replace(/\n$/, '').split('\n').length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it.each(PAGES.map((page) => [relative(ROOT, page), page]))('%s: every relative link leads to a file and heading that exist', (_name, page) => {
    expect(brokenLinks(page)).toEqual([]);
  });

  it('lists every page under docs/ in the README', () => {
    const listed = new Set(linkTargets(readFileSync(README, 'utf8')).map((target) => resolve(ROOT, target.split('#')[0])));
    const missing = PAGES.filter((page) => page !== README && !listed.has(page)).map((page) => relative(ROOT, page));
    expect(missing).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    const anchors = headingAnchors(
      [
        '# Other interfaces: Messages, Responses, legacy completions, embeddings',
        '## API reference (OpenAPI)',
        '### Libraries chosen, and why',
        '```bash',
        '# not a heading',
        '```',
        '## `GET /v1/models` and [the catalog](models.md)',
        '## Keys',
        '## Keys',
      ].join('\n'),
    );
    expect([...anchors]).toEqual([
      'other-interfaces-messages-responses-legacy-completions-embeddings',
      'api-reference-openapi',
      'libraries-chosen-and-why',
      'get-v1models-and-the-catalog',
      'keys',
      'keys-1',
    ]);
  });

  it('reads the links of the prose, not of code', () => {
    expect(linkTargets('[a](docs/x.md#y) `[b](c.md)` [c](d.md "title")\n```\n[e](f.md)\n```\n[ref]: g.md')).toEqual(['docs/x.md#y', 'd.md', 'g.md']);
  });
});
