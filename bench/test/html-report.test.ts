import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { repoRoot } from "@tern/testing";
import puppeteer from "puppeteer-core";
import { describe, expect, it } from "vitest";

/**
 * `pnpm bench --html` writes a self-contained report: charts in inline SVG, nothing fetched. It is
 * rendered here from a recorded run (bench/results), opened in headless Chromium with every
 * network request refused, and a screenshot saved beside it.
 */

const chromium = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const recorded = join(repoRoot, "bench/results/2026-11-22.json");

describe("pnpm bench --html", () => {
  it.skipIf(!existsSync(chromium))(
    "renders charts that open offline in headless Chromium",
    { timeout: 120_000 },
    async () => {
      const out = await mkdtemp(join(tmpdir(), "tern-bench-html-"));
      execFileSync(
        process.execPath,
        ["--import", "tsx", "bench/src/main.ts", "--html", "--from", recorded, "--out", out],
        {
          cwd: repoRoot,
          stdio: "pipe",
        },
      );
      const [file] = (await readdir(out)).filter((f) => f.endsWith(".html"));
      expect(file).toBe("2026-11-22.html");
      const html = await readFile(join(out, file!), "utf8");
      // Nothing from a CDN: no script, and no URL but the SVG namespace.
      expect(html).not.toMatch(/<script/i);
      for (const url of html.matchAll(/https?:\/\/[^"'\s)<]+/g)) expect(url[0]).toBe("http://www.w3.org/2000/svg");

      const browser = await puppeteer.launch({
        executablePath: chromium,
        headless: true,
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
      });
      try {
        const page = await browser.newPage();
        const fetched: string[] = [];
        await page.setRequestInterception(true);
        page.on("request", (req) => {
          if (req.url().startsWith("file:")) return void req.continue();
          fetched.push(req.url());
          void req.abort();
        });
        await page.setViewport({ width: 960, height: 1200 });
        await page.goto(pathToFileURL(join(out, file!)).href, { waitUntil: "load" });
        expect(fetched).toEqual([]);
        const charts = await page.$$eval("figure", (figs) =>
          figs.map((f) => {
            const svg = f.querySelector("svg")?.getBoundingClientRect();
            return {
              caption: f.querySelector("figcaption")?.textContent ?? "",
              width: svg?.width ?? 0,
              height: svg?.height ?? 0,
              bars: f.querySelectorAll("rect").length,
            };
          }),
        );
        expect(charts.map((c) => c.caption.split(" (")[0]?.trim())).toEqual([
          "Time to READY",
          "Stage breakdown of a start",
          "Events search latency against raw SQL",
          "Every ratio against its floor",
        ]);
        for (const c of charts) {
          expect(c.width, c.caption).toBeGreaterThan(300);
          expect(c.height, c.caption).toBeGreaterThan(40);
          expect(c.bars, c.caption).toBeGreaterThan(2);
        }
        const shot = join(out, "report.png");
        await page.screenshot({ path: shot, fullPage: true });
        expect((await stat(shot)).size).toBeGreaterThan(10_000);
        process.stdout.write(`bench report screenshot: ${shot}\n`);
      } finally {
        await browser.close();
      }
    },
  );
});
