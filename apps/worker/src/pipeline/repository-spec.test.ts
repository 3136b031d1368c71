import { describe, expect, it } from "vitest";
import { cloneUrlOf, gitAuthEnv, isSafeBranchName, repositorySpecOf } from "./repository-spec.ts";

describe("repositorySpecOf", () => {
  it("accepts owner/repo and a branch", () => {
    expect(repositorySpecOf({ selected_repository: "acme/app.js", selected_branch: "feature/x" })).toEqual({
      fullName: "acme/app.js",
      name: "app.js",
      branch: "feature/x",
      provider: "github",
    });
  });

  it("is null without a repository", () => {
    expect(repositorySpecOf({})).toBeNull();
    expect(repositorySpecOf({ selected_repository: "" })).toBeNull();
  });

  it.each([
    "--upload-pack=touch /tmp/pwned",
    "acme/--upload-pack=x",
    "-acme/app",
    "acme/../etc",
    "../acme",
    "acme",
    "acme/app/extra",
    "https://evil.example/acme/app",
    "acme/app:1",
    "ext::sh -c touch% /tmp/pwned",
    "acme /app",
  ])("refuses the repository %s", (name) => {
    expect(() => repositorySpecOf({ selected_repository: name })).toThrow(/invalid repository name/);
  });

  it("lets GitLab nest groups", () => {
    expect(repositorySpecOf({ selected_repository: "g/sub/app", git_provider: "gitlab" })?.name).toBe("app");
  });

  it.each(["-b", "--upload-pack=x", "a..b", "a:b", "a b", "/x", "x/", "x.lock", "@", "a@{1}", ".hidden"])(
    "refuses the branch %s",
    (branch) => {
      expect(isSafeBranchName(branch)).toBe(false);
      expect(() => repositorySpecOf({ selected_repository: "acme/app", selected_branch: branch })).toThrow(
        /invalid branch name/,
      );
    },
  );
});

describe("clone URL and auth", () => {
  const spec = { fullName: "acme/app", name: "app", branch: null, provider: "github" as const };

  it("builds the URL from configuration, per provider", () => {
    expect(cloneUrlOf(spec, { GIT_BASE_URL: "https://github.com/" })).toBe("https://github.com/acme/app.git");
    expect(
      cloneUrlOf(
        { ...spec, provider: "gitlab" },
        { GIT_BASE_URL: "https://github.com", GIT_BASE_URL_GITLAB: "https://gl.example" },
      ),
    ).toBe("https://gl.example/acme/app.git");
  });

  it("passes the token as an HTTP header through the environment only", () => {
    const env = gitAuthEnv(spec, "s3cret");
    expect(env.GIT_CONFIG_KEY_0).toBe("http.extraHeader");
    expect(env.GIT_CONFIG_VALUE_0).toBe(
      `Authorization: Basic ${Buffer.from("x-access-token:s3cret").toString("base64")}`,
    );
    expect(gitAuthEnv(spec, undefined)).toEqual({ GIT_TERMINAL_PROMPT: "0" });
  });
});
