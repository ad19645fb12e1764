# One image for the gateway and the worker; docker-compose.yml picks the entry point.
FROM node:20.20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The sources are not here yet: `prepare` (which builds) runs below, as `npm run build`.
RUN npm install --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY scripts ./scripts
COPY apps ./apps
COPY libs ./libs
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:20.20-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 SVC_DATA_DIR=/home/node/svc-data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
# A young generation of 2 x 32 MB (V8's default is 2 x 16): the requests in flight then outlive
# fewer scavenges, for about a tenth less of the gateway's CPU per request under load
# (docs/BENCHMARKS.md, sixth round). Only the command line sets it; npm run start:gateway and
# docker-compose.yml say the same.
CMD ["node", "--max-semi-space-size=32", "dist/apps/gateway/src/main.js"]
